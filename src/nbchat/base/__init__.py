"""What every layer shares: errors, events, records, options, settings, the safe renderer.

Nothing here imports another part of nbchat; everything else may import it.
"""
