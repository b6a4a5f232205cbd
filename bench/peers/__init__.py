"""The peers measured beside this server on the same weights: the raw onnxruntime-genai loop,
Hugging Face transformers, llama.cpp (llama-cpp-python and its C++ llama-server) and
sentence-transformers."""
