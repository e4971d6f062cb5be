"""toolbudget: keep an agent's tool-call history valid and inside its context budget."""
