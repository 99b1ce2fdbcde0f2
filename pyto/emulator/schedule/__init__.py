"""Stage schedule: the event loop over the encoded arrays (pipes, flags, L2) and what a stall means."""
