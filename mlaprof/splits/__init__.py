"""KV-split policies and the used-vs-deserved analysis of a step."""
