"""project-history-recall: find what was said and done in earlier sessions of the same project.

The Hermes plugin's entry is :func:`project_history_recall.faces.hermes.plugin.register`;
the library's is :class:`project_history_recall.recall.Recall`.
"""

from __future__ import annotations

__version__ = "0.1.0"
