"""Speech to text: Whisper-family models on onnxruntime-genai, a service of their own beside
the chat core (audio checks, the model's owner thread, transcription requests and results)."""
