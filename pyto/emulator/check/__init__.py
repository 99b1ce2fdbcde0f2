"""Stage check: the checked pass over a schedule (happens-before races, uninitialised and clobbered reads)."""
