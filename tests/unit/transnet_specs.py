"""Two short synthetic videos with known hard cuts, shared by the TransNetV2 tests (a few seconds each: the network
runs on CPU here at ~20-30 frames/s)."""

from videolake.synth import Segment, Transition, VideoSpec

HARD = VideoSpec(
    "tn_hard",
    320,
    240,
    "25",
    "h264",
    (
        Segment("testsrc2", 30),
        Segment("mandelbrot", 28),
        Segment("smptehdbars", 32),
        Segment("color:orange", 30),
        Segment("rgbtestsrc", 30),
    ),
    (Transition("cut"),) * 4,
)
SHORT = VideoSpec(
    "tn_short", 320, 240, "25", "h264", (Segment("mandelbrot", 40), Segment("testsrc2", 30)), (Transition("cut"),)
)
