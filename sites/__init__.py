"""The local practice web: generated multi-page websites with ground truth.

``generate_sites`` makes the sites, ``sites.server.PracticeWebServer`` serves them,
``sites.tasks.generate_tasks`` writes tasks about them and ``sites.verifier.verify`` scores
answers to those tasks.
"""

from sites.catalogues import Item
from sites.data import Site, generate_sites
from sites.domains import DOMAINS
from sites.themes import Theme

__all__ = ["DOMAINS", "Item", "Site", "Theme", "generate_sites"]
