"""Issue, list and revoke bearer API tokens.

python manage.py apitoken issue --user alice --name "ci bot"
python manage.py apitoken list [--user alice]
python manage.py apitoken revoke <id>
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from copilot_runtime.auth import do_issue_token, do_revoke_token
from copilot_runtime.models import ApiToken


class Command(BaseCommand):
    help = "Issue, list and revoke bearer API tokens for the Copilot runtime."

    def add_arguments(self, parser: ArgumentParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        issue = commands.add_parser("issue", help="Issue a token and print it once.")
        issue.add_argument("--user", required=True, help="Username the token acts as.")
        issue.add_argument("--name", required=True, help="What the token is for.")
        listing = commands.add_parser("list", help="List tokens (never their secret).")
        listing.add_argument("--user", help="Only this user's tokens.")
        revoke = commands.add_parser("revoke", help="Revoke a token by id.")
        revoke.add_argument("token_id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        command = options["command"]
        if command == "issue":
            user_model = get_user_model()
            try:
                user = user_model.objects.get(**{user_model.USERNAME_FIELD: options["user"]})
            except user_model.DoesNotExist as exc:
                raise CommandError(f"No user '{options['user']}'.") from exc
            token, raw = do_issue_token(user=user, name=options["name"])
            self.stdout.write(f"Issued token #{token.pk} for {options['user']}. Shown once:")
            self.stdout.write(raw)
        elif command == "list":
            tokens = ApiToken.objects.select_related("user")
            if options.get("user"):
                tokens = tokens.filter(user__username=options["user"])
            for token in tokens:
                state = "revoked" if token.revoked_at else "active"
                self.stdout.write(
                    f"#{token.pk}\t{token.name}\t{token.user}\t{token.token_prefix}…\t{state}\t"
                    f"last used: {token.last_used_at or 'never'}"
                )
        elif command == "revoke":
            token = ApiToken.objects.filter(pk=options["token_id"]).first()
            if token is None:
                raise CommandError(f"No token #{options['token_id']}.")
            do_revoke_token(token=token)
            self.stdout.write(f"Revoked token #{token.pk}.")
