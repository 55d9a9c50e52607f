"""The Jupyter front ends: the magics, the cell renderer, the panel, the tool prompts.

Each consumes the engine's events; none re-implements a turn. Importing this
package imports nothing; its modules import IPython and ipywidgets as they need.
"""
