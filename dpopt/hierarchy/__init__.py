"""The public hierarchy of grids: H3 parents (aperture 7) × coarser time slots, and the choice of
which nodes to measure and publish (multi-resolution release, models/hierarchy.md).
"""
