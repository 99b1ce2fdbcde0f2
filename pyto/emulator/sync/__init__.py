"""Stage sync: the dependencies a launch's synchronisation gives, per block (auto-sync, mutex tokens, cross-core
pairing); read by the encoder, never written into the trace."""
