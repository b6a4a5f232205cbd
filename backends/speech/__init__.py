"""Speech to text: Whisper-family models on onnxruntime-genai (audio checks and decoding, the
model and its runs, transcription requests and results). Their core is
:mod:`backends.core.speech_service`, beside the generators' and the encoders'."""
