"""Guardrails: input validation rules checked on the last user message of a turn.

Rules come from the admin (``GuardrailRule``) and from the request itself
(``cloud.guardrails.inputValidationRules``). Deny wins over allow; with any allow rule in
scope, a message must match one of them.

Modules, one concern each:

- ``config``: the ``GUARDRAILS_*`` settings, read once per turn;
- ``rules``: which rules apply to a turn, and what is checked (the subject);
- ``verdicts``: what evaluators answer and how their findings become one decision;
- ``local``, ``model``, ``cloud``: the evaluators (patterns and keywords; a topic classifier on
  the configured model; Copilot Cloud's ``/guardrails/validate``);
- ``regex``: the local evaluator's expressions, in RE2 (linear time), and why one is refused;
- ``gate``: runs the evaluators before the turn (``blocking``) or beside it (``parallel``);
- ``records``: stores every evaluation, and marks a denied user message;
- ``errors``: the denial as a canonical ``RunError`` and its wire texts.

This module imports nothing, so the protocol encoders can import ``errors`` cheaply.
"""
