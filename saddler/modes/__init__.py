"""The seed workflows as first-class modes: SKILL.md autoresearch (`skill`) and autoresearch fleets (`fleet`)."""
