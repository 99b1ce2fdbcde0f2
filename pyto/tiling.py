"""Placeholder replaced by the tiling work (seeds/002)."""
