"""The `saddler` command line: thin wrappers over the library (`saddler.cli.app:app`)."""
