"""How parties talk: typed messages, one serialiser, channels that count every byte."""
