"""Impl -> C: source, header, compilation, verification harness and benchmarking."""
