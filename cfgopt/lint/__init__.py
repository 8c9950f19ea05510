"""Linting a project: the engine that runs the rules, the fixer and its damage check, the reports, and the
project config."""
