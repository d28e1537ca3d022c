"""gpuwhy's version: its own module so that low modules can name it without importing
the package root (which imports the modes above them)."""

__version__ = "0.1.0"
