"""One module per subcommand (`cfgopt <name>`), each with `add_arguments(parser)` and `run(args) -> int`;
`cfgopt.cli` builds the parser from them and dispatches, importing only the one being run."""
