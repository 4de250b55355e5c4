"""The private differentiation machinery: trace -> connectivity -> rewrite -> vjp -> backward.

Nothing here is public API.  ``README.md`` beside this file explains the design in one
place; each module opens with its own design note.
"""
