"""Rule loading, op index notation, rewrite schemas and kernel matching."""
