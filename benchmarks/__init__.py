"""Load generator and fake upstream used for the published performance figures."""
