"""What every layer may use and which knows nothing of translation: errors, atomic file
writes, devices and precisions, the hardware line, progress bars, plots and their fonts, and
the registries that built-ins and plugins fill."""
