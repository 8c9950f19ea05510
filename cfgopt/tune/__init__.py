"""`cfgopt tune`: the fastest config that fits, by memory-pruned short runs of the real trainer."""
