"""Services: the only code that changes conversations (keyword-only, typed, transactional)."""
