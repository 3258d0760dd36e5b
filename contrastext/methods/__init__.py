"""Methods: thin compositions of encoder, views, negatives and objectives that return named loss parts."""
