"""The leakage-abuse attack (seed paper): what an honest-but-curious active party can infer
about passive parties' raw values from what it saw. It reads only recorded transcripts."""
