"""The speed plan, shared by the fix, `verify` and `tune`: the search space, the priors and the ranking, why a
candidate is left out, the data term, and the knob edits written into a config."""
