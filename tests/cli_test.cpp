// CLI tests: filled below.
