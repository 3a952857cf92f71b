"""Speed benchmarks: synthetic graphs, baselines written the usual way, and the benchmark runners."""
