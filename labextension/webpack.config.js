// Module and chunk ids by order rather than by a hash of their paths, which
// include the absolute path of the checkout: the build is byte-identical in any
// directory (.ci/run rebuilds it in a temporary copy and compares).
module.exports = {
  optimization: { moduleIds: 'natural', chunkIds: 'natural' }
};
