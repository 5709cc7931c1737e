"""Timestone's benchmarks: each module runs with `python -m bench.<name>` and writes
`bench/results/<name>.json` plus a markdown table on stdout."""
