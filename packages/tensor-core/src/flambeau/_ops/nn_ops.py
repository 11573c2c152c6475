"""Neural-network operators of tensor-core: softmax, log_softmax, embedding, dropout."""
