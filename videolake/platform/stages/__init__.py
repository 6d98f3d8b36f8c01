"""The CPU stages: ``ingest`` (raw_videos), ``split`` (scene_clips), ``score`` (filtered_clips); what they share is
in ``common`` (see its docstring)."""
