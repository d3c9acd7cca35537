"""Built-in target plugins of Morello, loaded through the ``morello`` entry-point group."""
