"""Stage encode: a launch's instructions as flat arrays for the event loop (costs, flags, L2 streams), shared by
blocks traced alike."""
