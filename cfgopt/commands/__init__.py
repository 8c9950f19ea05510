"""One module per subcommand (`cfgopt <name>`), each with `add_arguments(parser)` and `run(args) -> int`;
`cfgopt.cli` builds the parser from them and dispatches, importing only the one being run."""


class UsageError(Exception):
    """A usage error found after the arguments were parsed (e.g. `-` with other paths): `cfgopt.cli` prints
    the subcommand's usage and the message, exit 2, as argparse does for its own errors."""
