"""A user's file: read bounded and written atomically, as text with positions, its parsed view, the integers in
it, and findings at its spans. The ground floor: it imports nothing of cfgopt above it."""
