"""Placeholder: the fractal layouts of seeds/004 are being written (issue 2, part 3)."""
