
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var loaded = images.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.dataset.imagesLoaded = loaded.length + "/" + images.length;
});
