// placeholder: filled in by issue 16
