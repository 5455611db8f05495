"""Operations tools: the embedded dev stack, demo data, vendored browser assets, GC tuning."""
