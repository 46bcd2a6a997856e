"""Skill mode: the 000 seed's SKILL.md autoresearch (see `saddler.modes.skill.loop`)."""
