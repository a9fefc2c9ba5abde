"""Keras (tf_keras) encoders of our own, built from a Hugging Face checkpoint's config.json and loaded from its
model.safetensors in PyTorch names, with no transformers model class: every encoder on the Hub, not only the
families transformers once ported to TensorFlow (it dropped TensorFlow in v5).

One module per architecture (bert_family.py, deberta_v2.py, modernbert.py); classifier.py is the one interface the
rest of the project uses (build, load, export in PyTorch names). It imports only the ground floor of models/
(errors).
"""
