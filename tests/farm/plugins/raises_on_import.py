"""A plugin that cannot be loaded."""

raise RuntimeError("this plugin is broken on purpose")
