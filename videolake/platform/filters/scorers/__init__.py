"""Quality scorers that run a real model on a clip's frames (OCR, safety, faces, aesthetics), one module each.

They are plugins on the contract of ``videolake.platform.filters.quality.Scorer`` (registered in ``quality.SCORERS``, whose
built-ins name these modules), declare the frames they read (``Scorer.frames_wanted``) so that the score stage decodes
every scorer's frames in one pass over the video, and load their models once per worker process (``setup``).
"""
