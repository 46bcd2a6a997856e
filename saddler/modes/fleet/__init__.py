"""Fleet mode: the 002 seed's single-metric autoresearch fleet (see `saddler.modes.fleet.loop`)."""
