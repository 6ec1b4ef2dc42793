// placeholder: filled in by the edges issue (5)
